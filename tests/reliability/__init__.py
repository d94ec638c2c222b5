"""Reliability: fuzzing, adversarial input, fault injection, concurrency and soak (issue 8)."""
