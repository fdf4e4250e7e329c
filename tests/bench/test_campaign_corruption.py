"""The corruption campaign on a sample: flipped bits and cuts in files whose errors used to name
another file (schema, tag) and in a manifest without checksum read exactly or raise
CorruptFileError naming the damaged file. The whole campaign: `python -m bench.reliability`."""

from __future__ import annotations

from pathlib import Path

from bench.reliability.campaign_corruption import _attack, _build, _files


def test_a_sample_of_flips_and_cuts_reads_exactly_or_names_the_damaged_file(tmp_path: Path) -> None:
    files = _files(_build(tmp_path))
    attacks = [files["schema"], files["tag"],
               _files(_build(tmp_path, "db.plain", **{"manifest.compression": "none"}))["manifest"]]
    trials = 0
    for path, use in attacks:
        # About 12 flips per file (an odd stride, so bit positions vary), and 16+ cuts.
        tally = _attack(path, use, quick=True, stride=(path.stat().st_size // 12) | 1)
        assert (tally.lost, tally.wrong, tally.unclear) == (0, 0, 0), (path.name, tally.examples)
        assert tally.named > 0
        trials += tally.trials
    assert trials > 80
