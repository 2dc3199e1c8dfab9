-- The gallery's thumbnails are made by a sweep (thumbnailsWorkflow, on its own schedule), not by
-- each generation's workflow: a success records its images as pending here, and the sweep makes
-- the thumbnails of the pending images in batches and clears the mark. Images recorded before
-- this migration are not pending (their thumbnail was made, or the gallery shows the image).
ALTER TABLE gallery_images ADD COLUMN thumbnail_pending boolean NOT NULL DEFAULT false;
CREATE INDEX gallery_images_thumbnail_pending ON gallery_images (id) WHERE thumbnail_pending;
