"""Recover from a context-length rejection: trim the oldest messages once and retry."""

from __future__ import annotations

from effects import Continue, Retry
from pipeline import ApiErrorArgs, ApiErrorResult, Processor


class ErrorRecovery(Processor):
    id = "error-recovery"

    def process_api_error(self, args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        if args.retry_count > 0:
            return Continue()  # only once
        err = args.error
        if "context length" in err.message.lower() or err.code == "context_length_exceeded":
            msgs = args.message_list.messages
            if len(msgs) > 4:
                return Retry(args.message_list.remove_by_ids([msgs[1].id, msgs[2].id]))
        return Continue()
