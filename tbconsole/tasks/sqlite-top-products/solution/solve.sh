#!/bin/bash
sqlite3 /app/shop.db "
  SELECT p.name, SUM(s.qty * p.price_cents) AS revenue
  FROM sales s JOIN products p ON p.id = s.product_id
  WHERE s.sold_on BETWEEN '2024-03-01' AND '2024-03-31'
  GROUP BY p.id
  ORDER BY revenue DESC
  LIMIT 3;" > /app/top_products.txt
