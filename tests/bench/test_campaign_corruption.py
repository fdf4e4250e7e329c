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


def test_the_files_of_streaming_and_deletion_vector_reads_read_exactly_or_name_the_damaged_file(
        tmp_path: Path) -> None:
    from bench.reliability.campaign_corruption import _build_streaming, _streaming_files

    files = _streaming_files(_build_streaming(tmp_path))
    assert set(files) == {"changelog file", "changelog manifest", "changelog manifest list", "long-lived changelog",
                          "consumer file", "deletion-vector index file", "deletion-vector index manifest"}
    for kind, (path, use) in files.items():
        if kind == "consumer file":
            continue  # below, every bit
        tally = _attack(path, use, quick=True, stride=(path.stat().st_size // 8) | 1)
        assert (tally.lost, tally.wrong, tally.unclear) == (0, 0, 0), (kind, tally.examples)
        assert tally.named > 0, kind
    # The consumer file is Paimon's JSON, no checksum: of every bit of `{"nextSnapshot": N}`, only a
    # flip of N's digit into another valid snapshot id (here 8 -> 9) reads another position; a 0
    # (ids start at 1) read as "the earliest" before.
    path, use = files["consumer file"]
    tally = _attack(path, use, quick=False)
    assert tally.unclear == 0 and tally.named == tally.trials - 1, tally.examples
