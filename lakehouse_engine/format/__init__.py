"""The bytes of Paimon tables: BinaryRow, the bucket hash, manifests and snapshots."""
