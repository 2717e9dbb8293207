-- Fewer index writes per message: every enqueue, lease and retry wrote four indexes.
-- The stats counts now read the due index, which carries `state` for them (an in-flight
-- lease and a delayed message are both "due later"), so the (queue, state, visible_at)
-- index goes.
DROP INDEX tasuki_messages_state;
DROP INDEX tasuki_messages_due;
CREATE INDEX tasuki_messages_due ON tasuki_messages (queue, visible_at, seq) INCLUDE (state)
    WHERE state < 2;
