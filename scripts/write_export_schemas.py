"""Write the JSON Schema of every export shape and of a batch's summary to docs/schemas/ (tests check
they are current).

python scripts/write_export_schemas.py
"""

from __future__ import annotations

import json
from pathlib import Path

from council.exports.shapes import SCHEMA_DIR, export_schemas
from council.exports.summary import SUMMARY_SCHEMA, summary_schema

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    target = ROOT / SCHEMA_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name, schema in export_schemas().items():
        path = target / f"export-{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    path = target / SUMMARY_SCHEMA
    path.write_text(json.dumps(summary_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
