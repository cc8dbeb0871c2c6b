"""`spacy-elmo serve`: ELMo vectors, and ELMo pipelines, over HTTP.

settings: limits and batching; batcher: one worker thread that runs the model, batching
requests across clients; served: what the worker runs (a biLM alone, or a pipeline with an
`elmo` component) and its description; inputs: request bodies checked into jobs;
answers: content negotiation and response bodies. Only `app` and `run` import FastAPI and
uvicorn (the `serve` extra); everything else runs without them.
"""
