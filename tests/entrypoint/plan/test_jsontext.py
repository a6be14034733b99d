"""The shim's JSON without the json package (plan/jsontext.py) is json's, value for value and error for error.

``loads`` must give what ``json.loads`` gives for any text (the value, or a JSONDecodeError with the same message
and position, or the same other exception), and ``dumps_indented`` must write what ``json.dumps(value, indent=2)``
writes, byte for byte: the dry-run's plan and every rank table the shim reads go through them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from malaunch.entrypoint.plan.jsontext import dumps_indented, loads, quoted, scan

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=12))  # fmt: skip
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=30,
)


def _outcome(decode: Any, text: str) -> Tuple[str, Any]:
    """What decoding ``text`` gives, comparable across decoders (NaN made comparable through its text)."""
    try:
        value = decode(text)
    except json.JSONDecodeError as exc:
        return "error", (exc.msg, exc.pos, exc.lineno, exc.colno)
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)
    return "value", json.dumps(value, sort_keys=True)


@pytest.mark.slow
@PROPERTY
@given(values)
def test_the_indented_text_is_json_dumps_indent_2(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2)


@pytest.mark.slow
@PROPERTY
@given(values, st.integers(min_value=0, max_value=400), st.sampled_from(["", " ", "\n\t ", "x", "]", " 1"]))
def test_any_text_decodes_as_json_loads_decodes_it(value: Any, cut: int, tail: str) -> None:
    text = json.dumps(value, indent=None if cut % 2 else 2)
    for candidate in (text, text[:cut], text + tail, " \n" + text[cut:], "\ufeff" + text):
        assert _outcome(loads, candidate) == _outcome(json.loads, candidate), candidate


@PROPERTY
@given(st.text(alphabet=' \t\n\r{}[],:"0123456789.eE+-truefalsnNaIiy\\u', max_size=30))
def test_json_shaped_garbage_fails_as_json_loads_fails(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text)


@pytest.mark.slow
@PROPERTY
@given(values, st.integers(min_value=0, max_value=400), st.sampled_from(["", ", 2]", "] x", " ", "}"]))
def test_a_value_inside_a_text_scans_as_raw_decode_scans_it(value: Any, at: int, tail: str) -> None:
    # scan decodes the one value at an index, as JSONDecoder.raw_decode does, and says where it ends.
    text = json.dumps(value, indent=None if at % 2 else 2)
    for before, candidate in (("[", text + tail), ("x: ", text[:at]), ("", text[at:] + tail), ("  ", text)):
        whole = before + candidate
        start = len(before)
        ours = _outcome(lambda t, start=start: scan(t, start), whole)  # type: ignore[misc]
        theirs = _outcome(lambda t, start=start: json.JSONDecoder().raw_decode(t, start), whole)  # type: ignore[misc]
        assert ours == theirs, whole


def test_parse_int_is_called_for_integers_only() -> None:
    seen = []

    def keep(digits: str) -> int:
        seen.append(digits)
        return -1

    assert loads('{"a": [12, 1.5, "7", -3]}', integer=keep) == json.loads('{"a": [12, 1.5, "7", -3]}',
                                                                            parse_int=lambda _: -1)
    assert seen == ["12", "-3"]


@pytest.mark.parametrize("text", ["NaN", "[Infinity, -Infinity]", '{"x": NaN}'])
def test_the_constants_json_accepts_are_accepted(text: str) -> None:
    assert repr(loads(text)) == repr(json.loads(text))
    assert math.isnan(loads("NaN"))


def test_a_string_is_quoted_as_json_quotes_it() -> None:
    for text in ["", "plain", 'quote " and \\ back', "tab\tnew\nline", "caf\u00e9 \u65e5\U0001f600", "\x00\x1f"]:
        assert quoted(text) == json.dumps(text)


def test_values_json_writes_its_own_way_are_handed_to_json() -> None:
    odd = {1: "int key", None: [True, 2.5], "nested": {"k": (1, 2)}}
    assert dumps_indented(odd) == json.dumps(odd, indent=2)
    with pytest.raises(TypeError):
        dumps_indented({"not": {1, 2}})


FRESH = (
    "import sys\n"
    "from malaunch.entrypoint.plan.jsontext import loads\n"
    "for text in sys.argv[1:]:\n"
    "    try:\n"
    "        loads(text)\n"
    "    except ValueError as exc:\n"
    "        print(type(exc).__name__, getattr(exc, 'msg', ''), getattr(exc, 'pos', ''))\n"
)


def test_bad_input_in_a_fresh_process_fails_as_json_does(tmp_path: Path) -> None:
    # Python 3.10 and 3.11's C scanner can raise its error only once json.decoder is imported: a fresh process
    # (no site hooks, the shim alone on the path) gets json's own error, not a SystemError.
    site = tmp_path / "site"
    (site / "malaunch").mkdir(parents=True)
    (site / "malaunch" / "entrypoint").symlink_to(Path(__file__).resolve().parents[3] / "entrypoint")
    texts = ['{"a": [1, 2', '[1, 2,]', '{"a" 1}', "[1] x", "", '"\\x"', "[NaN, -]"]
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-S", "-c", FRESH, *texts], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = []
    for text in texts:
        with pytest.raises(json.JSONDecodeError) as caught:
            json.loads(text)
        expected.append(f"JSONDecodeError {caught.value.msg} {caught.value.pos}")
    assert done.stdout.splitlines() == expected
