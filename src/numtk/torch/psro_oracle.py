"""numtk.torch.psro_oracle."""
from numtk.torch._psro_oracle import ALGORITHMS, ConditionalBROracle, RLBestResponseOracle, RolloutEnv  # noqa: F401
