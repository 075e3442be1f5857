"""The pure methods: statistics and decision rules over plain data, no I/O (docs/methods.md).

- ``ranking``: consensus from reviewers' rankings (Borda, mean rank, Copeland; the registry);
- ``concordance``: Kendall's W and its Friedman / Durbin / Skillings–Mack test;
- ``distributions``: chi-square, F and t tails; ``significance``: tests computed from sums;
- ``bias_indicators``: calibration, length and position formulas, honesty minimums, profile labels;
- ``swap``: position-swap strategies; ``voting``: majority votes; ``averaging``: several judges;
- ``verdicts``: what those decide, as data; ``judge_agreement``: a judge against human labels;
- ``bradley_terry``: the ratings fit and its bootstrap; ``graphs``: connected components.

Nothing is imported here, so a module loads only what it uses (``bradley_terry`` alone needs numpy).
"""
