"""Slack's documented contract for every Web API method the fake serves: one table.

Each entry is read off the method's reference page (``page``, at
docs.slack.dev/reference/methods/<method>): its required and optional arguments with their
types, the limits the page states, the error codes the page lists, and the code Slack answers
when an argument is missing or wrong, where the page names one (else the common
``invalid_arguments``, with ``[ERROR] missing required field: <name>``). ``rules.py`` holds
the fake to it before any handler runs; a method served without an entry here answers
``unknown_method`` (``FakeSlack.uncovered``), so the fake cannot quietly serve more than it
was told.

Where a page leaves something open the entry says how the fake reads it (``note``): the
stricter reading, so that what passes here passes Slack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .blockkit import Surface

__all__ = ["COMMON_ERRORS", "CONTRACT", "Arg", "Kind", "Method", "page"]

Kind = Literal["string", "int", "boolean", "array", "object"]


def _errors(codes: str) -> frozenset[str]:
    return frozenset(codes.split())


COMMON_ERRORS = _errors("""
    access_denied accesslimited account_inactive deprecated_endpoint ekm_access_denied
    enterprise_is_restricted fatal_error internal_error invalid_arg_name invalid_arguments
    invalid_array_arg invalid_auth invalid_charset invalid_form_data invalid_json
    invalid_post_type is_bot json_not_object method_deprecated missing_post_type missing_scope
    no_permission not_allowed_token_type not_authed org_login_required ratelimited
    request_timeout service_unavailable team_added_to_org token_expired token_revoked
    two_factor_setup_required unknown_method""")
"""The "Common errors" every method page lists, and the two of Slack's JSON-body guide
(docs.slack.dev/apis/web-api/#posting-json: ``invalid_json``, ``json_not_object``)."""


def page(method: str) -> str:
    return f"https://docs.slack.dev/reference/methods/{method}"


@dataclass(frozen=True)
class Arg:
    """One argument: its type, and what Slack answers when it is missing, wrong or too long."""

    kind: Kind
    most: int | None = None
    """Longest string (characters) or array (items) the page allows."""
    choices: tuple[str, ...] = ()
    missing: str = "invalid_arguments"
    wrong: str = "invalid_arguments"
    """Of another type, or not one of ``choices``."""
    long: str = "invalid_arguments"
    empty: bool = False
    """``""`` counts as given (``assistant.threads.setStatus``: an empty status clears it)."""


@dataclass(frozen=True)
class Method:
    """One Web API method as its reference page gives it."""

    page: str
    required: Mapping[str, Arg] = field(default_factory=dict)
    optional: Mapping[str, Arg] = field(default_factory=dict)
    errors: frozenset[str] = frozenset()
    """The page's error table (the common errors are in ``COMMON_ERRORS``)."""
    undocumented: frozenset[str] = frozenset()
    """Codes the fake answers that the page does not list (``note`` says why)."""
    one_of: tuple[str, ...] = ()
    """At least one of these must be given, else ``no_text``."""
    blocks: tuple[str, Surface] | None = None
    """Where Block Kit blocks travel (``blocks``, or ``view`` for a view's) and on what."""
    blocks_error: str = "invalid_blocks"
    too_many_blocks: str = "invalid_blocks"
    note: str = ""

    @property
    def arguments(self) -> dict[str, Arg]:
        return {**self.optional, **self.required}


S, INT, BOOL = Arg("string"), Arg("int"), Arg("boolean")
ARRAY, OBJECT = Arg("array"), Arg("object")
CHANNEL = Arg("string", missing="channel_not_found")
"""A message method without ``channel`` answers ``channel_not_found`` ("Value passed for
``channel`` was invalid")."""
BLOCKS = Arg("array", wrong="invalid_blocks_format")
METADATA = Arg("object", wrong="invalid_metadata_format")
MARKDOWN = Arg("string", most=12_000)
"""Every page with ``markdown_text``: "Limit this field to 12,000 characters"."""
CHUNKS = Arg("array", wrong="invalid_chunks")
SESSION_STATUSES = ("processing", "active", "suspended", "closed")
"""An agent session's statuses (``agents.sessions.setStatus``, ``chat.stopStream``)."""

_MESSAGE_ERRORS = _errors("""
    channel_not_found duplicate_channel_not_found duplicate_message_not_found
    ekm_access_denied invalid_blocks invalid_metadata_format invalid_metadata_schema
    is_archived message_limit_exceeded messages_tab_disabled metadata_must_be_sent_from_app
    metadata_too_large msg_blocks_too_long no_text not_in_channel rate_limited
    restricted_action restricted_action_non_threadable_channel
    restricted_action_read_only_channel restricted_action_thread_locked
    restricted_action_thread_only_channel slack_connect_canvas_sharing_blocked
    slack_connect_file_link_sharing_blocked slack_connect_lists_sharing_blocked
    team_not_found""")
"""What chat.postMessage and the three stream methods' pages all list."""
_STREAM_ERRORS = _MESSAGE_ERRORS | _errors("""
    as_user_not_supported channel_type_not_supported invalid_chunks message_not_found
    message_not_in_streaming_state message_not_owned_by_app msg_blocks_too_many
    too_many_attachments too_many_contact_cards""")
"""What chat.appendStream's and chat.stopStream's pages both list."""
_CHAT = {
    "chat.postMessage": Method(
        page("chat.postMessage"),
        required={"channel": CHANNEL},
        optional={"text": Arg("string", most=40_000, long="msg_too_long"),
                  "blocks": BLOCKS, "attachments": ARRAY, "metadata": METADATA,
                  "markdown_text": MARKDOWN, "thread_ts": S, "reply_broadcast": BOOL,
                  "unfurl_links": BOOL, "unfurl_media": BOOL, "mrkdwn": BOOL,
                  "link_names": BOOL, "as_user": BOOL, "icon_emoji": S, "icon_url": S,
                  "username": S, "parse": S, "current_draft_last_updated_ts": S},
        errors=_MESSAGE_ERRORS | _errors("""app_access_restricted as_user_not_supported
            attachment_payload_limit_exceeded cannot_reply_to_message draft_already_deleted
            draft_already_sent draft_has_conflict draft_not_found invalid_blocks_format
            markdown_text_conflict missing_file_data send_on_behalf_not_allowed
            too_many_attachments too_many_contact_cards"""),
        undocumented=_errors("invalid_thread_ts msg_too_long"),
        one_of=("text", "blocks", "attachments", "markdown_text"),
        blocks=("blocks", "message"),
        note="Past 40,000 characters Slack truncates ``text`` (the page's \"Truncating "
             "content\"); the fake refuses with ``msg_too_long`` (chat.update's code) so "
             "that nothing relies on the cut. A ``thread_ts`` naming no message answers "
             "``invalid_thread_ts`` (the page does not say; the fake does not start a new "
             "thread). A channel name instead of an id is refused (``channel_not_found``)."),
    "chat.update": Method(
        page("chat.update"),
        required={"channel": CHANNEL, "ts": S},
        optional={"text": Arg("string", most=4_000, long="msg_too_long"),
                  "blocks": BLOCKS, "attachments": Arg("array", wrong="invalid_attachments"),
                  "metadata": METADATA,
                  "markdown_text": Arg("string", most=12_000, long="msg_too_long"),
                  "as_user": BOOL, "link_names": S, "parse": S, "reply_broadcast": BOOL,
                  "file_ids": ARRAY, "unfurled_attachments": ARRAY},
        errors=_errors("""as_user_not_supported block_mismatch blocked_file_type
            cant_broadcast_message cant_update_message channel_not_found edit_window_closed
            external_channel_migrating file_deleted file_is_deleted file_not_found
            file_share_limit_reached invalid_attachments invalid_blocks invalid_blocks_format
            invalid_metadata_format invalid_metadata_schema is_inactive
            markdown_text_conflict max_file_sharing_exceeded message_limit_exceeded
            message_not_found metadata_must_be_sent_from_app metadata_too_large msg_too_long
            no_dual_broadcast_content_update no_text posting_to_channel_denied
            slack_connect_blocked_file_type slack_connect_canvas_sharing_blocked
            slack_connect_clip_sharing_blocked slack_connect_file_link_sharing_blocked
            slack_connect_file_upload_sharing_blocked streaming_state_conflict team_not_found
            too_many_attachments unable_to_share_files update_failed"""),
        one_of=("text", "blocks", "attachments", "markdown_text"),
        blocks=("blocks", "message"),
        note="msg_too_long: \"The ``text`` field cannot exceed 4,000 characters.\" A "
             "message still streaming answers ``streaming_state_conflict``."),
    "chat.postEphemeral": Method(
        page("chat.postEphemeral"),
        required={"channel": CHANNEL, "user": S},
        optional={"text": Arg("string", most=4_000, long="msg_too_long"),
                  "blocks": BLOCKS, "attachments": Arg("array", wrong="invalid_attachments"),
                  "markdown_text": Arg("string", most=12_000, long="msg_too_long"),
                  "thread_ts": S, "as_user": BOOL, "icon_emoji": S, "icon_url": S,
                  "link_names": BOOL, "parse": S, "username": S, "metadata": OBJECT},
        errors=_errors("""cannot_reply_to_message channel_not_found invalid_attachments
            invalid_blocks invalid_blocks_format is_archived markdown_text_conflict
            message_limit_exceeded messages_tab_disabled msg_too_long no_text not_in_channel
            restricted_action too_many_attachments user_not_in_channel"""),
        one_of=("text", "blocks", "attachments", "markdown_text"),
        blocks=("blocks", "message"),
        note="msg_too_long is listed without a number: the fake uses chat.update's 4,000."),
    "chat.delete": Method(
        page("chat.delete"), required={"channel": CHANNEL, "ts": S},
        optional={"as_user": BOOL},
        errors=_errors("cant_delete_message channel_not_found message_not_found")),
    "chat.startStream": Method(
        page("chat.startStream"),
        required={"channel": CHANNEL},
        optional={"thread_ts": S, "markdown_text": MARKDOWN, "chunks": CHUNKS,
                  "recipient_user_id": S, "recipient_team_id": S,
                  "task_display_mode": Arg("string", choices=("timeline", "plan")),
                  "icon_emoji": S, "icon_url": S, "username": S},
        errors=_MESSAGE_ERRORS | _errors("""channel_type_not_supported invalid_blocks_format
            invalid_chunks messaging_processing_failed missing_recipient_team_id
            missing_recipient_user_id msg_blocks_too_many
            not_subscribed_to_message_stream_stopped user_not_found"""),
        undocumented=_errors("invalid_thread_ts not_allowed method_not_supported"),
        note="recipient_user_id and recipient_team_id: \"Required when streaming to "
             "channels\": outside a DM (a channel id not starting with D) the fake answers "
             "missing_recipient_team_id, then missing_recipient_user_id (the order of the "
             "page's table). thread_ts is optional (a top-level stream, in channels only): "
             "in a DM the fake requires it. Chunks are markdown_text, task_update, "
             "plan_update or blocks, else invalid_chunks. not_allowed and "
             "method_not_supported are what ``Streams.refuse`` makes it answer."),
    "chat.appendStream": Method(
        page("chat.appendStream"),
        required={"channel": CHANNEL, "ts": S},
        optional={"markdown_text": MARKDOWN, "chunks": CHUNKS},
        errors=_STREAM_ERRORS | _errors("messaging_processing_failed stopped_by_user"),
        one_of=("markdown_text", "chunks"),
        note="The page marks markdown_text required, from before chunks: its own SDK helpers "
             "(slack_sdk's AsyncChatStream) append with chunks alone, so the fake wants one "
             "of the two (no_text)."),
    "chat.stopStream": Method(
        page("chat.stopStream"),
        required={"channel": CHANNEL, "ts": S},
        optional={"markdown_text": MARKDOWN, "chunks": CHUNKS,
                  "blocks": Arg("array", wrong="invalid_blocks"), "metadata": METADATA,
                  "session_status": Arg("string", choices=SESSION_STATUSES)},
        errors=_STREAM_ERRORS | _errors("attachment_payload_limit_exceeded "
                                        "cannot_reply_to_message missing_file_data"),
        blocks=("blocks", "message"), too_many_blocks="msg_blocks_too_many",
        note="session_status: \"The session status to set after stopping the stream. "
             "Default: active\": the thread's agent session, if it has one, takes it (or "
             "active, when not given); a thread with none gets none (the page does not say "
             "that stopping a stream creates a session). A value not among the four: "
             "invalid_arguments (the page names no code)."),
}
_READS = {
    "conversations.replies": Method(
        page("conversations.replies"),
        required={"channel": CHANNEL, "ts": Arg("string", missing="thread_not_found")},
        optional={"cursor": S, "include_all_metadata": BOOL, "inclusive": BOOL,
                  "latest": S, "limit": INT, "oldest": S},
        errors=_errors("""channel_not_found invalid_cursor invalid_metadata_filter_keys
            invalid_ts_latest invalid_ts_oldest list_record_comment_fetch_failed
            method_not_supported_for_channel_type missing_scope thread_not_found"""),
        note="thread_not_found: \"Value for ``ts`` was missing or invalid\". Every page "
             "repeats the thread's root (dedupe by ts)."),
    "conversations.history": Method(
        page("conversations.history"),
        required={"channel": CHANNEL},
        optional={"cursor": S, "include_all_metadata": BOOL, "inclusive": BOOL,
                  "latest": S, "limit": INT, "oldest": S},
        errors=_errors("""channel_is_limited_access channel_not_found invalid_cursor
            invalid_metadata_filter_keys invalid_ts_latest invalid_ts_oldest
            not_in_channel""")),
    "reactions.add": Method(
        page("reactions.add"),
        required={"channel": Arg("string", missing="no_item_specified"), "name": S,
                  "timestamp": Arg("string", missing="no_item_specified")},
        errors=_errors("""already_reacted bad_timestamp channel_not_found
            external_channel_migrating invalid_name is_archived message_not_found no_access
            no_item_specified not_reactable thread_locked too_many_emoji
            too_many_reactions"""),
        note="no_item_specified: \"combination of channel and timestamp was not "
             "specified\"."),
    "reactions.remove": Method(
        page("reactions.remove"),
        required={"name": S},
        optional={"channel": S, "timestamp": S, "file": S, "file_comment": S},
        errors=_errors("""bad_timestamp channel_not_found external_channel_migrating
            file_comment_not_found file_not_found invalid_name message_not_found no_access
            no_item_specified no_reaction thread_locked"""),
        note="Without file, file_comment or channel and timestamp: no_item_specified."),
}
_ASSISTANT = {
    "assistant.threads.setStatus": Method(
        page("assistant.threads.setStatus"),
        required={"channel_id": S, "thread_ts": S, "status": Arg("string", empty=True)},
        optional={"loading_messages": Arg("array", most=10), "icon_emoji": S,
                  "icon_url": S, "username": S},
        errors=_errors("channel_not_found invalid_thread_ts reserved_username"),
        note="An empty status clears it. loading_messages: \"Maximum of 10 messages\". "
             "thread_ts must be the thread's root (invalid_thread_ts)."),
    "assistant.threads.setSuggestedPrompts": Method(
        page("assistant.threads.setSuggestedPrompts"),
        required={"channel_id": S, "prompts": ARRAY},
        optional={"thread_ts": S, "title": S},
        errors=_errors("channel_not_found invalid_thread_ts message_not_found "
                       "not_agent_app"),
        note="Each prompt needs a title and a message; the fake takes at most 4, as "
             "Slack's panel shows."),
    "assistant.threads.setTitle": Method(
        page("assistant.threads.setTitle"),
        required={"channel_id": S, "thread_ts": S, "title": S},
        errors=_errors("channel_not_found invalid_thread_ts")),
}
_SESSION_THREAD = Arg("string", missing="thread_ts_required")
_AGENTS = {
    "agents.sessions.setStatus": Method(
        page("agents.sessions.setStatus"),
        required={"channel_id": S, "thread_ts": _SESSION_THREAD,
                  "status": Arg("string", choices=SESSION_STATUSES, wrong="invalid_status")},
        optional={"title": Arg("string", most=200), "initiator_user_id": S,
                  "icon_emoji": S, "icon_url": S, "username": Arg("string", most=200)},
        errors=_errors("""channel_not_found feature_disabled internal_error invalid_status
            not_authorized thread_ts_not_allowed thread_ts_required user_not_found"""),
        note="thread_ts is \"Required for thread-based sessions in regular channels and "
             "DMs\", the only sessions the fake has (no session channels): without it, "
             "thread_ts_required. title and initiator_user_id count only when the session "
             "is created. A thread_ts naming no thread root: invalid_arguments (undocumented)."),
    "agents.sessions.rename": Method(
        page("agents.sessions.rename"),
        required={"channel_id": S, "thread_ts": _SESSION_THREAD,
                  "title": Arg("string", most=200)},
        errors=_errors("""channel_not_found feature_disabled internal_error invalid_name
            is_archived name_taken not_authorized session_not_found thread_ts_not_allowed
            thread_ts_required"""),
        note="title: 1 to 200 characters. No session in that thread: session_not_found."),
}
_FILES = {
    "files.getUploadURLExternal": Method(
        page("files.getUploadURLExternal"),
        required={"filename": S, "length": INT},
        optional={"snippet_type": S, "alt_txt": S},
        errors=_errors("""alt_txt_too_large file_type_not_allowed file_upload_size_restricted
            file_uploads_disabled file_uploads_except_images_disabled missing_argument
            snippet_too_large storage_limit_reached unknown_snippet_type unknown_subtype""")),
    "files.completeUploadExternal": Method(
        page("files.completeUploadExternal"),
        required={"files": ARRAY},
        optional={"channel_id": S, "thread_ts": S, "channels": S, "initial_comment": S,
                  "blocks": ARRAY, "username": S, "icon_url": S, "icon_emoji": S},
        errors=_errors("""access_denied channel_not_found channels_limit_exceeded
            file_not_found file_type_not_allowed file_update_failed
            file_uploads_except_images_disabled invalid_blocks invalid_channel not_in_channel
            posting_to_channel_denied"""),
        undocumented=_errors("file_upload_size_mismatch"),
        note="file_upload_size_mismatch (the bytes sent differ from ``length``) is what "
             "Slack answers in practice; the page does not list it."),
    "files.info": Method(
        page("files.info"),
        required={"file": S},
        optional={"count": INT, "cursor": S, "limit": INT, "page": INT},
        errors=_errors("""access_denied canvas_disabled_file_team canvas_disabled_user_team
            canvas_globally_disabled file_deleted file_not_found not_visible
            slack_connect_canvas_sharing_blocked template_not_visible""")),
}
_APP = {
    "auth.test": Method(page("auth.test"), errors=_errors("internal_error invalid_auth")),
    "apps.connections.open": Method(
        page("apps.connections.open"),
        errors=_errors("forbidden_team insecure_request internal_error invalid_auth "
                       "missing_args"),
        note="Only with the app-level token (xapp-): a bot token answers "
             "not_allowed_token_type."),
    "views.publish": Method(
        page("views.publish"),
        required={"user_id": S, "view": OBJECT},
        optional={"hash": S, "interactivity_pointer": S},
        errors=_errors("""duplicate_external_id hash_conflict missing_profile_id
            not_allowed_token_type not_enabled not_implemented view_too_large"""),
        blocks=("view", "home"), blocks_error="invalid_arguments",
        too_many_blocks="invalid_arguments",
        note="The page lists no block error: a view Slack cannot take answers the common "
             "invalid_arguments, with the json-pointer of what is wrong; a Home tab holds "
             "at most 100 blocks. ``view`` is a JSON object (slack_sdk sends it as one)."),
}

_USERS = {
    "users.info": Method(
        page("users.info"),
        required={"user": S},
        optional={"include_locale": BOOL},
        errors=_errors("too_many_users user_not_found user_not_visible"),
        note="https://api.slack.com/methods/users.info (the same page, at its old address). "
             "user_not_found: \"Value passed for ``user`` was invalid\": an id nobody has; a "
             "call without ``user`` answers the common invalid_arguments. The person's "
             "``tz`` is an IANA name, ``tz_label`` its name in words, ``tz_offset`` seconds "
             "east of UTC."),
}

_CONVERSATIONS = {
    "conversations.info": Method(
        page("conversations.info"),
        required={"channel": Arg("string", missing="channel_not_found")},
        optional={"include_locale": BOOL, "include_num_members": BOOL},
        errors=_errors("channel_not_found channel_is_limited_access"),
        note="channel_not_found: \"Value passed for ``channel`` was invalid\" (the fake "
             "answers it for a missing channel too, as the message methods do). Scopes: "
             "channels:read, groups:read, im:read or mpim:read, the one of the "
             "conversation's kind (conversations.py). The answer's ``channel`` is a "
             "conversation object: ``is_private``, ``is_im``, ``is_mpim``."),
}

CONTRACT: dict[str, Method] = {**_CHAT, **_READS, **_ASSISTANT, **_AGENTS, **_FILES, **_APP,
                               **_USERS, **_CONVERSATIONS}
"""Every method the fake serves, by its Slack name."""
