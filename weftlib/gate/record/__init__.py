"""The public record of DFC runs and what the suite makes of it: `params/device_ops.yaml` as data (allowlist, its
schema), the weighing of evidence into parse, refused or unjudged (standing), each entry against its evidence, and
the record's outcomes rebuilt as small graphs (public_record)."""
