"""The loop after training: which rows to label next, and drift."""
