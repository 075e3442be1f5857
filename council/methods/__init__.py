"""The pure methods: statistics and decision rules over plain data, no I/O (docs/methods.md).

- ``ranking``: consensus from reviewers' rankings (Borda, mean rank, Copeland; the registry);
- ``concordance``: Kendall's W and its Friedman / Durbin / Skillings–Mack test;
- ``distributions``: chi-square, F and t tails; ``significance``: tests computed from sums;
- ``exact_moments``: means and variances correctly rounded;
- ``bias_indicators``: calibration, length and position formulas, honesty minimums, profile labels;
- ``swap``: position-swap strategies; ``voting``: majority votes; ``averaging``: several judges;
- ``verdicts``: what those decide, as data; ``judge_agreement``: a judge against human labels;
- ``bradley_terry``: the ratings fit and its bootstrap; ``graphs``: connected components;
- ``logistic``: logistic regression on a sparse design; ``style_control``: Bradley–Terry with
  style covariates; ``style_counts``: what an answer's length and markdown count are;
  ``length_controlled``: raw and length-controlled win rates against a baseline;
- ``gcra``: the arithmetic of a shared rate budget;
- ``dawid_skene``: several annotators' verdicts weighed without labels (Dawid–Skene EM);
  ``panel``: a jury as a whole (agreement, Krippendorff's α, error correlation, n_eff);
  ``calibration``: stated probabilities against right verdicts (ECE, Brier, reliability table);
  ``isotonic``: the monotone calibration map (pool-adjacent-violators).

Nothing is imported here, so a module loads only what it uses (``bradley_terry`` alone needs
numpy): import the module you need; each declares its public names in ``__all__`` or by having
no leading underscore.
"""

__all__: list[str] = []
