-- 15: a message's folded text (what recall matches and counts words in) kept in its row, uncompressed while the row
-- holds it. Recall reads the folded text of every match twice (the match, then the count of the word in it); a text
-- moved out of the row or compressed was fetched and decompressed each time: a tool's output of 7 kB cost 5 us a
-- reading, most of a look-up's time where matches were long (the statements of bench context_latency's 100k
-- history run again on both storages: a count 0.73 -> 0.57 ms, a look-up 1.03 -> 0.87). A row may now grow to a
-- page before anything in it is compressed, and the original text is compressed, then moved out, first. Only rows
-- written from now on are kept so (nothing is rewritten: the upgrade is instant).
ALTER TABLE messages SET (toast_tuple_target = 8160);
ALTER TABLE messages ALTER COLUMN content_folded SET STORAGE MAIN;
