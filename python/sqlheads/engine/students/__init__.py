"""Students and how they learn from a teacher: one module per student kind, the
distillation loop, its loss, the transfer rows and any model's soft labels."""
