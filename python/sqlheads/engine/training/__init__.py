"""Fine-tuning transformer classifiers: the tuning loop and the teacher it trains."""
