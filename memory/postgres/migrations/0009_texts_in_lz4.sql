-- 9: the long texts recall reads compressed with lz4 instead of pglz. A message over about 2 kB is stored
-- compressed, and a look-up decompresses each candidate twice (its folded text for the match, its text for the
-- ranking): with pglz that was a third of a look-up's time on the database (2.4 -> 1.7 ms for a hundred hits).
-- Only what is written from now on is compressed this way (nothing is rewritten: the upgrade is instant). A
-- server before PostgreSQL 14 (no per-column compression) or built without lz4 keeps pglz.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE messages ALTER COLUMN content SET COMPRESSION lz4,'
                ' ALTER COLUMN content_folded SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE memory_records ALTER COLUMN content SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE threads ALTER COLUMN chronicle_summary SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this server has no lz4: long texts stay compressed with pglz';
END
$$;
