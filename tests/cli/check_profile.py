"""Reads a kpipe profile with h5py and its Chrome trace with json, as a user
would, and checks them against docs/formats.md ("Profile").
Usage: check_profile.py PROFILE.h5 TRACE.json EXPECTED_EVENTS"""
import json
import sys

import h5py

profile_path, trace_path, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(profile_path, "r") as f:
    assert f.attrs["format"] == b"kpipe-profile", f.attrs["format"]
    kinds = f.attrs["kinds"].decode().split()
    p, d, steps = int(f.attrs["p"]), int(f.attrs["d"]), int(f.attrs["steps"])
    measured = f["measured"]
    rows = measured["start"].shape[0]
    assert rows == expected, (rows, expected)
    for column in ("rank", "step", "index", "kind", "microbatch", "chunk", "stage", "peer", "tag", "end", "bytes"):
        assert measured[column].shape == (rows,), column
    assert (measured["end"][:] >= measured["start"][:]).all()
    assert set(measured["step"][:]) == set(range(steps))
    assert set(measured["rank"][:]) == set(range(p * d))
    sends = [i for i, k in enumerate(measured["kind"][:]) if kinds[k].startswith("SEND")]
    assert sends and all(measured["bytes"][i] > 0 for i in sends)
    assert f["predicted"]["start"].shape[0] * steps == rows
    assert f["predicted"]["stage_costs"].shape == (p * int(f.attrs["v"]), 3)
with open(trace_path) as t:
    events = [e for e in json.load(t)["traceEvents"] if e["ph"] == "X"]
assert len(events) == expected, (len(events), expected)
print(f"h5py: {rows} rows, {len(events)} trace events, kinds {' '.join(kinds)}")
