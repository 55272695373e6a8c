"""Layout of a capture directory: what the online mode records and --from-capture reads."""

CAPTURE_LOG = "log_profile.txt"
CAPTURE_KERNELS = "autotune_kernels"
INDUCTOR_CACHE = "inductor_cache"
PROFILE_DIR = "profile"
RUNS_DIR = "runs"
ENV_FILE = "triton_env.json"
PEAKS_FILE = "device_peaks.json"
REPRO_FILE = "repro_command.json"     # {"command": [...]}: what the capture ran, for the A/B suggestion
