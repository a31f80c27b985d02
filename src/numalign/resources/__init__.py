"""Resource providers: hints and allocation for CPUs, memory and devices (kubelet managers)."""
