"""Model providers: one `ModelClient` per API. Each imports its SDK only when built.

Rule: providers know the vocabulary and tools (the model boundary), never the engine,
structured output or a loop.
"""
