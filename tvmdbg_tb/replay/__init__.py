"""Op-level truth inside fused kernels: re-run a fused kernel's Relax ops one by one.

group.py builds (lazily, once per kernel) an unfused function from the module right after
FuseOps; replayer.py runs it on a kernel call's inputs and describes every op's output health
as a FusedOpReplay record; auto.py decides when a running program replays.
"""
