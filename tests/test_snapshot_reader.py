"""snapshot.parse reads a snapshot with a fast reader and, where it refuses, with _load, which
names the field: both must accept and refuse the same data."""

import copy
import json

import pytest

from backtwice import snapshot as snap
from backtwice.errors import InputError

RUN = "scenarios.c1_backward_twice"
CHANGES = {
    "bool for an int": (f"{RUN}.raised.line", True, "should be of type int"),
    "int for a str": (f"{RUN}.raised.message", 3, "should be of type str"),
    "str for a number": ("environment.python", 3.11, "should be of type str"),
    "object for a list": (f"{RUN}.outputs", {}, "should be a list"),
    "list for an object": ("environment", [], "should be an object"),
    "list for a dict": ("scenarios", [], "should be an object"),
    "null for a str": ("environment.torch", None, "should be of type str"),
    "null where null is allowed, a list for its str": (
        f"{RUN}.raised.code",
        [],
        "should be of type str",
    ),
}


def changed(data, dotted, value):
    """A copy of data with the field at `dotted` (keys split on '.') set to value."""
    data = copy.deepcopy(data)
    *parents, last = dotted.split(".")
    holder = data
    for key in parents:
        holder = holder[key]
    assert last in holder, dotted
    holder[last] = value
    return data


def test_the_fast_reader_builds_what_load_builds(snapshot_data):
    fast = snap._reader(snap.Snapshot)(snapshot_data)
    assert fast == snap._load(snap.Snapshot, snapshot_data, "")
    assert snap.dumps(fast) == snap.dumps(snap._load(snap.Snapshot, snapshot_data, ""))


@pytest.mark.parametrize("dotted, value, words", CHANGES.values(), ids=list(CHANGES))
def test_both_refuse_a_wrong_type_and_the_message_names_the_field(
    snapshot_data, tmp_path, dotted, value, words
):
    data = changed(snapshot_data, dotted, value)
    with pytest.raises(ValueError):
        snap._reader(snap.Snapshot)(data)
    with pytest.raises(InputError) as caught:
        snap.parse(json.dumps(data), tmp_path / "torch-2.13.0.json")
    assert f"field '{dotted}' {words}" in str(caught.value)


def test_both_refuse_a_missing_field(snapshot_data, tmp_path):
    data = copy.deepcopy(snapshot_data)
    del data["scenarios"]["c1_backward_twice"]["raised"]["line"]
    with pytest.raises(KeyError):
        snap._reader(snap.Snapshot)(data)
    with pytest.raises(InputError, match=f"field '{RUN}.raised.line' is missing"):
        snap.parse(json.dumps(data), tmp_path / "torch-2.13.0.json")
