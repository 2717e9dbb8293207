-- A group's barrier keeps how many of its slots are filled, counted once per slot as it
-- is taken (`flow_slot_taken`), where each member's settle counted the slots before.
ALTER TABLE tasuki_flow_barriers ADD COLUMN filled integer NOT NULL DEFAULT 0;

UPDATE tasuki_flow_barriers b SET filled = (
    SELECT count(*) FROM tasuki_flow_slots s WHERE s.flow = b.flow AND s.barrier = b.barrier
);
