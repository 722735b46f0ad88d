-- Baselines kept as compact bytes (`GroupBaseline::to_bytes`: the rings'
-- values as f32, the models' weights as f64). Rows written before keep
-- their JSON in `state`; packed rows leave `state` empty.
ALTER TABLE baselines ADD COLUMN packed BLOB;
