"""Model backends. `embedded` loads the bundled SmolLM2 / Gemma-3 GGUF models offline."""
