"""Local fakes of external services, speaking their real wire formats."""
