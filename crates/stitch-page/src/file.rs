//! The page file: whole zones claimed from the [`ZoneStore`], pages laid out in them in
//! order. Page `p` lives in zone `zones[p / pages_per_zone]` at offset
//! `(p % pages_per_zone) * PAGE_SIZE`. Pages are overwritten in place (unlike extents, which
//! are written once), so the zones are owned whole, as log segments are, and named by the
//! page store's checkpoint record.

use crate::page::PAGE_SIZE;
use crate::{PageError, PageId, Result};
use std::sync::Arc;
use stitch_zone::{ZoneId, ZoneStore};

/// Where each page lives on the device.
#[derive(Clone)]
pub struct PageFile {
    zones: Arc<ZoneStore>,
    owned: Vec<ZoneId>,
    pages_per_zone: u32,
}

impl std::fmt::Debug for PageFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageFile")
            .field("zones", &self.owned)
            .field("pages_per_zone", &self.pages_per_zone)
            .finish()
    }
}

impl PageFile {
    /// A page file over `owned` zones of `zones`.
    pub fn new(zones: Arc<ZoneStore>, owned: Vec<ZoneId>) -> Self {
        let pages_per_zone = (zones.zone_size() / PAGE_SIZE as u64) as u32;
        PageFile {
            zones,
            owned,
            pages_per_zone,
        }
    }

    /// The zone store.
    pub fn zones(&self) -> &Arc<ZoneStore> {
        &self.zones
    }

    /// The zones holding the pages, in page order.
    pub fn owned(&self) -> &[ZoneId] {
        &self.owned
    }

    /// How many pages the zones hold.
    pub fn capacity(&self) -> u64 {
        self.owned.len() as u64 * u64::from(self.pages_per_zone)
    }

    /// Takes one more zone from the zone store. The caller must make a checkpoint naming it
    /// durable before any page in it is written.
    pub fn grow(&mut self) -> Result<()> {
        let zone = self.zones.alloc_zone()?;
        self.zones.zone_ready(zone);
        self.owned.push(zone);
        Ok(())
    }

    /// The device offset of `page`.
    pub fn offset(&self, page: PageId) -> Result<u64> {
        let zone = self
            .owned
            .get((page / self.pages_per_zone) as usize)
            .ok_or_else(|| {
                PageError::Invalid(format!(
                    "page {page} is past the page file's {} pages",
                    self.capacity()
                ))
            })?;
        Ok(
            self.zones.zone_offset(*zone)
                + u64::from(page % self.pages_per_zone) * PAGE_SIZE as u64,
        )
    }
}
