"""The serving benchmark's wire formats, which every server kind's bench backends are built from: the request bodies
(`formats`), the body a backend sends with bench_serving's sampling rule (`wire`), and the reading of a streamed answer
(`streams`: the measurements, the reading state and the OpenAI formats' chunk readers)."""
