"""Render the HTML bias report from a synthetic database and screenshot it in headless Chromium.

    python benchmarks/render_report.py --out /tmp/report.png            # 20,000 records, 1280 px wide
    python benchmarks/render_report.py --out r.png --html r.html --records 2000 --width 800

The records come from ``bench_bias_report.sessions`` (planted harshness, length, position and
self-preference effects), so every chart has something to show. The page is what
``council bias-report --html`` writes. Chromium runs headless with a fresh profile and no
network services; the screenshot is the top ``--height`` pixels of the page at ``--width``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_bias_report import sessions  # noqa: E402

from council.bias.html import render_html  # noqa: E402
from council.bias.report import DEFAULT_MAX_POINTS, bias_report  # noqa: E402
from council.storage import SQLiteStore  # noqa: E402

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)


def synthetic_report_html(records: int, seed: int) -> str:
    """The report page over ``records`` synthetic bias records in a throwaway database."""
    with tempfile.TemporaryDirectory(prefix="council-report-") as home:
        store = SQLiteStore.open(Path(home) / "council.db")
        try:
            store.insert_bias_records(itertools.islice(sessions(records, seed), records))
            report = bias_report(store, max_points=DEFAULT_MAX_POINTS)
        finally:
            store.close()
    return render_html(report, title="council bias report (synthetic data)")


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    sys.exit("no Chromium found (Debian: apt-get install -y chromium)")


def screenshot(html_path: Path, png_path: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory(prefix="council-chromium-") as profile:
        cmd = [
            find_chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={png_path}",
            html_path.resolve().as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not png_path.exists():
        sys.exit(f"chromium failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="PNG to write")
    parser.add_argument("--html", type=Path, help="also keep the HTML page here")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=4200)
    args = parser.parse_args()

    page = synthetic_report_html(args.records, args.seed)
    with tempfile.TemporaryDirectory(prefix="council-page-") as tmp:
        html_path = args.html or Path(tmp) / "report.html"
        html_path.write_text(page, encoding="utf-8")
        screenshot(html_path, args.out, args.width, args.height)
    print(f"wrote {args.out} ({os.path.getsize(args.out):,} bytes)" + (f" and {args.html}" if args.html else ""))


if __name__ == "__main__":
    main()
