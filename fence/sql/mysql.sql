DELIMITER //
CREATE TABLE IF NOT EXISTS zklock_fence (
		name       VARBINARY(255) NOT NULL PRIMARY KEY,
		token      BIGINT         NOT NULL,
		holder     VARBINARY(255) NOT NULL DEFAULT '',
		updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
	) ENGINE = InnoDB //
DROP PROCEDURE IF EXISTS zklock_fence //
CREATE PROCEDURE zklock_fence(IN p_name VARBINARY(255), IN p_token BIGINT, IN p_holder VARBINARY(255))
	COMMENT 'zklock_fence v1'
	MODIFIES SQL DATA
	BEGIN
		DECLARE seen BIGINT;
		DECLARE msg VARCHAR(512);
		IF p_name IS NULL OR p_name = '' THEN
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'zklock_fence: empty name';
		END IF;
		IF p_token IS NULL OR p_token <= 0 THEN
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'zklock_fence: token is not positive';
		END IF;
		INSERT INTO zklock_fence (name, token, holder) VALUES (p_name, p_token, IFNULL(p_holder, ''))
			ON DUPLICATE KEY UPDATE name = name;
		SELECT token INTO seen FROM zklock_fence WHERE name = p_name FOR UPDATE;
		IF seen > p_token THEN
			-- No name: MySQL cuts a SIGNAL's text at 128 characters.
			SET msg = CONCAT('zklock_fence: stale token ', p_token, ' (seen ', seen, ')');
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
		END IF;
		UPDATE zklock_fence SET token = p_token, holder = IFNULL(p_holder, ''), updated_at = CURRENT_TIMESTAMP(6)
			WHERE name = p_name;
	END //
DELIMITER ;
