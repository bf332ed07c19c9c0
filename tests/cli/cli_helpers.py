"""What the CLI tests share: the scripts they run, kernel lines by their text, the schema check."""
import pathlib

import jsonschema

from tlx_workbench.json_schema import SCHEMA, SCHEMA_ID

SCRIPTS = pathlib.Path(__file__).parent / "scripts"


def line_of(path, text: str) -> int:
    """The 1-based line of ``path`` that holds ``text`` (so tests name lines as the kernel's source has them)."""
    for i, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in {path}")


def valid(doc, verb: str) -> dict:
    """``doc`` checked against the published schema, for ``verb``."""
    assert doc is not None, "no JSON document written"
    jsonschema.validate(doc, SCHEMA)
    assert doc["schema"] == SCHEMA_ID and doc["verb"] == verb
    return doc
