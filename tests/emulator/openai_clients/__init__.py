"""Conformance with the public OpenAI Realtime clients, on the real `openai` SDK over TLS.

The clients, each driving the GA protocol as its own code does (file:line in the comments, at the
commits read):
- the openai SDK's realtime examples (openai/openai-python e43b422, examples/realtime/): what
  they send and read, on the SDK itself (test_sdk_examples.py);
- an openai-agents RealtimeAgent with a function tool, run for real (the `openai-agents`
  package, 0.24.0). Its OpenAIRealtimeWebSocketModel does not read OPENAI_BASE_URL: it connects to
  `model_config["url"]`, else to api.openai.com (agents/realtime/openai_realtime.py, connect()).
  It runs in a venv of its own, `.venv-agents`, which `make install` makes: it pins
  websockets<17, and the emulator needs 17 (tests/emulator/agents_session.py;
  test_openai_agents.py);
- pipecat's OpenAIRealtimeLLMService (pipecat-ai/pipecat acead05,
  src/pipecat/services/openai/realtime/llm.py and events.py) and LiveKit Agents' RealtimeModel
  (livekit/agents da6af86, livekit-plugins/livekit-plugins-openai/livekit/plugins/openai/realtime/
  realtime_model.py and utils.py), reproduced in pipecat_service.py and livekit_model.py and
  run in test_pipecat.py and test_livekit.py: the events each sends, in its order and with its
  fields, sent on the SDK's connection; what each reads of the server's events asserted. This reaches what a
  run of the real client does not steer (barge-in, truncation, locally driven turns,
  interruption, conversation.item.retrieve). The real clients, unmodified, run in
  test_openai_public_clients.py (pipecat-ai 1.14.0, livekit-agents 1.8.9, each in a venv of its
  own that `make install` makes), whose traffic is checked with pipecat_problems,
  livekit_problems and sdk_problems from here (sdk_problems and the rest the tests share
  in events.py).

Every server event is also validated against the SDK's own types, strictly, as openai-agents
validates them (a failure there is an error event in the agent's session). A test gathers what
it finds and fails once, with all of it.
"""
