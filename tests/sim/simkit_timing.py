"""A user timing model for the tests: 0.1 ms per new prompt token, 0.05 ms per KV token."""


class Linear:
    def prefill_ms(self, new_tokens, batch_size, mean_isl, mean_prefix):
        return 0.1 * new_tokens

    def decode_ms(self, batch_size, active_kv_tokens, mean_context, total_kv_tokens):
        return 0.05 * active_kv_tokens


class LinearSharedWeights(Linear):
    """Linear, but decode requests in a pass that also prefills save 0.01 ms per prefill token."""

    def mixed_decode_ms(
        self, batch_size, active_kv_tokens, mean_context, total_kv_tokens, prefill_tokens
    ):
        return 0.05 * active_kv_tokens - 0.01 * prefill_tokens


class NanDecode(Linear):
    """A broken user model: decode time NaN."""

    def decode_ms(self, batch_size, active_kv_tokens, mean_context, total_kv_tokens):
        return float("nan")


class InfPrefill(Linear):
    """A broken user model: prefill time infinite."""

    def prefill_ms(self, new_tokens, batch_size, mean_isl, mean_prefix):
        return float("inf")


class NanBulk(Linear):
    """A broken user model: its bulk decode times hold a NaN."""

    def decode_ms_bulk(self, batch_size, active_kv_tokens, mean_context, total_kv_tokens):
        return [float("nan")] + [0.05 * k for k in active_kv_tokens[1:]]
