-- One index fewer to write per enqueue and per lease: the primary key on `seq`. Rows are
-- found by (queue, id) everywhere, and the lease joins the rows it locked by `ctid` (a
-- locked row cannot move under its own statement), so (queue, id) becomes the key and
-- `seq` stays a plain column that orders messages enqueued in the same instant.
ALTER TABLE tasuki_messages DROP CONSTRAINT tasuki_messages_pkey;
ALTER TABLE tasuki_messages ADD CONSTRAINT tasuki_messages_id PRIMARY KEY USING INDEX tasuki_messages_id;
