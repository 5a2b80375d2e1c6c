//! One cgroup per run (v1 or v2).
