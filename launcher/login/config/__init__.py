"""Recipe schema (dataclasses), composition (Hydra) and validation."""
