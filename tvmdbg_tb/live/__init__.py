"""Live debugging: watchpoints, and pause/step/continue of a running program from the dashboard."""
