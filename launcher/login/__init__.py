"""The login side, one pass: compose (config/) -> validate -> plan -> render (sbatch)
-> submit -> follow (cli). Hydra/OmegaConf live here only; the node never imports
this package (it reads job.json, launcher.contracts.job)."""
