"""The launcher's defaults that the argument parser shows: a leaf module, so registering
``numalign run`` imports nothing else."""

#: the launcher's topology manager policy when neither ``--policy`` nor the spec names one
DEFAULT_POLICY = "restricted"
