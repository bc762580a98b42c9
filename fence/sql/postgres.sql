BEGIN;
SELECT pg_advisory_xact_lock(7498011873);
CREATE TABLE IF NOT EXISTS zklock_fence (
		name       text        PRIMARY KEY,
		token      bigint      NOT NULL CHECK (token > 0),
		holder     text        NOT NULL DEFAULT '',
		updated_at timestamptz NOT NULL DEFAULT now()
	);
CREATE OR REPLACE FUNCTION zklock_fence(p_name text, p_token bigint, p_holder text DEFAULT '')
	RETURNS bigint LANGUAGE plpgsql AS $$
	DECLARE
		seen bigint;
	BEGIN
		IF p_name IS NULL OR p_name = '' THEN
			RAISE EXCEPTION 'zklock_fence: empty name' USING ERRCODE = '22023';
		END IF;
		IF p_token IS NULL OR p_token <= 0 THEN
			RAISE EXCEPTION 'zklock_fence: token % is not positive', p_token USING ERRCODE = '22023';
		END IF;
		-- Locks the row whether or not it updates it.
		INSERT INTO zklock_fence AS f (name, token, holder) VALUES (p_name, p_token, coalesce(p_holder, ''))
		ON CONFLICT (name) DO UPDATE
			SET token = EXCLUDED.token, holder = EXCLUDED.holder, updated_at = now()
			WHERE f.token <= EXCLUDED.token
		RETURNING f.token INTO seen;
		IF seen IS NULL THEN
			SELECT f.token INTO seen FROM zklock_fence f WHERE f.name = p_name;
			RAISE EXCEPTION 'zklock_fence: stale token % (seen %) for %', p_token, seen, p_name;
		END IF;
		RETURN p_token;
	END $$;
COMMENT ON FUNCTION zklock_fence(text, bigint, text) IS 'zklock_fence v1';
COMMIT;
