"""Running a launch: the engine, the deterministic task scheduler, the waves of CTAs run together (``batch``), the
source rewrite that makes a kernel schedulable and the threads the simulator's array work runs on."""
