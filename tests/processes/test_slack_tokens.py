"""`maiden run` and `maiden check` with a Slack token that cannot be used, as real processes
against the fake: a refused token is one line and exit 2; check probes the token even
when the mode's other secret is unset."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.slack import FakeSlack
from tests.processes.test_slack_cli import configure, env, maiden


async def test_run_with_a_token_slack_refuses_says_so_in_one_line(home: Path) -> None:
    async with FakeSlack() as fake:
        configure(home, fake)
        for variable, method in (("SLACK_BOT_TOKEN", "auth.test"),
                                 ("SLACK_APP_TOKEN", "apps.connections.open")):
            wrong = env(fake, **{variable: "xoxb-not-the-token"})
            code, out, err = await maiden(home, wrong, "run")
            assert code == 2 and "Ready" not in out  # a configuration problem
            said = [line for line in err.splitlines() if line.startswith("maiden:")]
            assert said == [f"maiden: Slack refused ${variable} ({method} at "
                            f"{fake.api_url}): invalid_auth"], err
            assert "Traceback" not in err


async def test_check_in_http_mode_probes_the_token_without_the_signing_secret(
        home: Path) -> None:
    async with FakeSlack() as fake:
        configure(home, fake, 'mode = "http"\n')
        code, out, _ = await maiden(home, env(fake), "check")  # no $SLACK_SIGNING_SECRET
        assert code == 1 and "$SLACK_SIGNING_SECRET: NOT SET" in out
        assert fake.calls("auth.test")  # probed anyway
        assert "workspace Maiden Test (T0FAKE0001)" in out
