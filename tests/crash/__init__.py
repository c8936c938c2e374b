"""Crash tests: a real process is killed with SIGKILL at named points and restarted."""
