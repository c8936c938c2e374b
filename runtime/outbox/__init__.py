"""What leaves the process: the outbox that posts a run's messages exactly once and in
order, and the live replies shown while a run writes them."""

__all__: list[str] = []
