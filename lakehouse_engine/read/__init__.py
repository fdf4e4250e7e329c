"""Reading: scan (manifests to splits), predicates, and merge-on-read to Arrow."""
