"""The slow resilience tier: crashes, faults and a full disk, each through real parts."""
