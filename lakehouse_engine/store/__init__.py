"""A table's metadata files on a FileIO: schemas, snapshots, tags and manifests."""
